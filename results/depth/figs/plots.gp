# gnuplot script written by iclprobe compare; rerun with: gnuplot plots.gp
set datafile separator ','
set key outside right top noenhanced
set grid
set logscale y
set format y '10^{%L}'
set terminal pngcairo size 1000,600
set output 'spd_cell0.png'
set title 'L1: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell0.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell0.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell0.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell0.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell0.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell0.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell0.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell0.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell0.svg'
set title 'L1: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell0.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell0.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell0.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell0.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell0.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell0.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell0.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell0.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell1.png'
set title 'L2: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell1.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell1.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell1.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell1.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell1.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell1.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell1.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell1.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell1.svg'
set title 'L2: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell1.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell1.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell1.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell1.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell1.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell1.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell1.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell1.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell2.png'
set title 'L4: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell2.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell2.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell2.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell2.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell2.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell2.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell2.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell2.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell2.svg'
set title 'L4: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell2.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell2.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell2.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell2.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell2.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell2.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell2.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell2.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell3.png'
set title 'L8: SPD / d to each learner (4 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell3.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell3.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell3.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell3.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell3.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell3.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell3.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell3.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell3.svg'
set title 'L8: SPD / d to each learner (4 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell3.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell3.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell3.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell3.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell3.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell3.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell3.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell3.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell4.png'
set title 'L1@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell4.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell4.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell4.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell4.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell4.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell4.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell4.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell4.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell4.svg'
set title 'L1@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell4.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell4.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell4.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell4.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell4.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell4.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell4.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell4.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell5.png'
set title 'L1@5000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell5.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell5.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell5.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell5.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell5.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell5.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell5.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell5.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell5.svg'
set title 'L1@5000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell5.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell5.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell5.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell5.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell5.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell5.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell5.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell5.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell6.png'
set title 'L2@40000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell6.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell6.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell6.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell6.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell6.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell6.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell6.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell6.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell6.svg'
set title 'L2@40000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell6.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell6.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell6.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell6.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell6.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell6.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell6.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell6.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell7.png'
set title 'L2@20000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell7.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell7.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell7.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell7.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell7.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell7.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell7.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell7.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell7.svg'
set title 'L2@20000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell7.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell7.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell7.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell7.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell7.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell7.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell7.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell7.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell8.png'
set title 'L2@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell8.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell8.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell8.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell8.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell8.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell8.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell8.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell8.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell8.svg'
set title 'L2@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell8.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell8.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell8.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell8.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell8.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell8.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell8.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell8.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell9.png'
set title 'L4@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell9.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell9.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell9.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell9.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell9.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell9.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell9.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell9.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell9.svg'
set title 'L4@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell9.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell9.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell9.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell9.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell9.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell9.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell9.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell9.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell10.png'
set title 'L4@5000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell10.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell10.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell10.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell10.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell10.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell10.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell10.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell10.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell10.svg'
set title 'L4@5000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell10.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell10.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell10.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell10.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell10.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell10.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell10.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell10.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell11.png'
set title 'L8@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell11.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell11.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell11.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell11.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell11.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell11.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell11.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell11.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell11.svg'
set title 'L8@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell11.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell11.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell11.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell11.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell11.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell11.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell11.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell11.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell12.png'
set title 'L8@5000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell12.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell12.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell12.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell12.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell12.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell12.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell12.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell12.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell12.svg'
set title 'L8@5000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell12.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell12.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell12.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell12.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell12.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell12.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'sgd:fit', 'spd_cell12.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell12.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
